"""Writes the template `sam local invoke` and `sam local start-api` run, from
template.yaml, into a build directory of bootstraps, offline:

    .venv/bin/python infra/sam_local/template.py BUILD_DIR [--bins DIR] [--authorizer BIN]

- Every function's CodeUri becomes BUILD_DIR/<Function>, where its
  `bootstrap` is: `sam build` put it there already, or, with `--bins DIR`,
  the workspace's own build of the function's binary (the template's
  `BuildProperties.Binary`) is linked there. The build metadata goes, so SAM
  runs the directory as it is.
- With `--authorizer BIN` the HTTP API's JWT authorizer is replaced, under
  the same name, by a Lambda authorizer: BIN (`seckill-local`) run as
  `seckill-local jwt-authorizer`. SAM's local gateway runs Lambda
  authorizers only; a JWT authorizer it skips, and the function then gets
  no claims. The stand-in checks the token as API Gateway would (signature,
  issuer, audience, expiry) and hands the function the claims where API
  Gateway's JWT authorizer puts them: `requestContext.authorizer.jwt`.

Prints the template's path.
"""

import argparse
import os
import shutil
import sys

from samcli.yamlhelper import yaml_dump, yaml_parse

AUTHORIZER_FUNCTION = "LocalJwtAuthorizerFunction"
AUTHORIZER_NAME = "JwtAuthorizer"


def link(src, dst):
    if os.path.lexists(dst):
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--template", default="template.yaml")
    parser.add_argument("--bins", help="the workspace's build of the functions' binaries")
    parser.add_argument("--authorizer", help="seckill-local, run as the local JWT authorizer")
    parser.add_argument("--out", default="template.yaml", help="file name inside BUILD_DIR")
    args = parser.parse_args()

    with open(args.template, encoding="utf-8") as f:
        template = yaml_parse(f.read())
    build = os.path.abspath(args.build_dir)
    os.makedirs(build, exist_ok=True)
    resources = template["Resources"]
    functions = [n for n, r in resources.items() if r.get("Type") == "AWS::Serverless::Function"]
    for name in functions:
        resource = resources[name]
        code = os.path.join(build, name)
        os.makedirs(code, exist_ok=True)
        if args.bins:
            binary = resource.get("Metadata", {}).get("BuildProperties", {}).get("Binary")
            if not binary:
                sys.exit(f"{name}: no Metadata.BuildProperties.Binary in {args.template}")
            src = os.path.join(args.bins, binary)
            if not os.path.isfile(src):
                sys.exit(f"{name}: {src} is not built")
            link(src, os.path.join(code, "bootstrap"))
        elif not os.path.isfile(os.path.join(code, "bootstrap")):
            sys.exit(f"{name}: no bootstrap in {code} (run `make build` or pass --bins)")
        resource.pop("Metadata", None)
        resource["Properties"]["CodeUri"] = code

    # A nested stack's local template, named relative to template.yaml.
    here = os.path.dirname(os.path.abspath(args.template))
    for resource in resources.values():
        props = resource.get("Properties", {})
        for key in ("TemplateURL", "Location"):
            url = props.get(key)
            if isinstance(url, str) and "://" not in url and not os.path.isabs(url):
                props[key] = os.path.join(here, url)

    if args.authorizer:
        code = os.path.join(build, AUTHORIZER_FUNCTION)
        os.makedirs(code, exist_ok=True)
        link(args.authorizer, os.path.join(code, "seckill-local"))
        bootstrap = os.path.join(code, "bootstrap")
        with open(bootstrap, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\nexec /var/task/seckill-local jwt-authorizer\n")
        os.chmod(bootstrap, 0o755)
        resources[AUTHORIZER_FUNCTION] = {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "CodeUri": code,
                "Description": "sam local only: API Gateway's JWT authorizer, as a Lambda authorizer",
            },
        }
        for resource in resources.values():
            if resource.get("Type") != "AWS::Serverless::HttpApi":
                continue
            auth = resource["Properties"]["Auth"]
            auth["Authorizers"][AUTHORIZER_NAME] = {
                "FunctionArn": {"Fn::GetAtt": [AUTHORIZER_FUNCTION, "Arn"]},
                "AuthorizerPayloadFormatVersion": "1.0",
                "Identity": {"Headers": ["Authorization"]},
            }

    out = os.path.join(build, args.out)
    with open(out, "w", encoding="utf-8") as f:
        f.write(yaml_dump(template))
    print(out)


if __name__ == "__main__":
    main()
