"""The environment `sam local invoke` gives each function, without Docker.

Usage: python sam_local_env.py TEMPLATE ENV_VARS_FILE [Key=Value ...]
(the arguments of `sam local invoke --template --env-vars
--parameter-overrides`). Prints {logical id: {variable: value}} as JSON.

Runs SAM CLI's own code for it (the stack provider with the parameter
overrides, then the local runner's environment builder), so it shows what
the installed SAM CLI resolves: which variables it keeps, which intrinsics it
leaves empty, and which the env-vars file may override. Run it with the
Python of SAM CLI's virtual environment (tests/template.rs does).
"""

import json
import sys

from samcli.commands.local.lib.local_lambda import LocalLambdaRunner
from samcli.lib.providers.sam_function_provider import SamFunctionProvider
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider


def main():
    template, env_file = sys.argv[1], sys.argv[2]
    overrides = dict(arg.split("=", 1) for arg in sys.argv[3:])
    with open(env_file, encoding="utf-8") as f:
        env_values = json.load(f)
    stacks, _ = SamLocalStackProvider.get_stacks(template, parameter_overrides=overrides)
    provider = SamFunctionProvider(stacks)
    # No container runtime: only the environment builder is used.
    runner = LocalLambdaRunner(
        local_runtime=None,
        function_provider=provider,
        cwd=".",
        real_path=".",
        env_vars_values=env_values,
    )
    out = {}
    for function in provider.get_all():
        out[function.name] = runner._make_env_vars(function).resolve()  # pylint: disable=protected-access
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
