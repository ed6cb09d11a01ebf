"""checkov over the templates, with the accepted findings of one file.

Usage (infra/stack.sh test runs it with checkov's own virtual environment):

    .venv-checkov/bin/python infra/checkov/gate.py [SKIPS_FILE]

Runs checkov (CloudFormation framework, offline) over template.yaml and
infra/redis-stack.yaml, then compares its failed checks with
infra/checkov/skips.yaml (or SKIPS_FILE). Exit 1 when a finding is not
listed there, when an entry has no reason, or when an entry matches no
finding any more. checkov's own per-resource skip comments are not used:
every accepted finding is in the one file, with its reason.
"""

import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = ["template.yaml", "infra/redis-stack.yaml"]


def run_checkov():
    checkov = os.path.join(os.path.dirname(sys.executable), "checkov")
    args = [checkov, "--framework", "cloudformation", "--output", "json", "--quiet", "--compact"]
    # Offline: no guideline download, no upload.
    args += ["--skip-download", "--skip-results-upload"]
    for template in TEMPLATES:
        args += ["--file", template]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)
    # Exit 1 is "findings"; anything else is checkov failing to run.
    if done.returncode not in (0, 1):
        sys.exit(f"checkov failed ({done.returncode}):\n{done.stderr}")
    reports = json.loads(done.stdout)
    if isinstance(reports, dict):
        reports = [reports]
    passed, failed = 0, []
    for report in reports:
        if report.get("summary", {}).get("parsing_errors"):
            sys.exit(f"checkov could not parse a template: {report['summary']}")
        passed += report.get("summary", {}).get("passed", 0)
        failed += report.get("results", {}).get("failed_checks", [])
    return passed, failed


def load_skips(path):
    with open(path, encoding="utf-8") as f:
        entries = yaml.safe_load(f)["skips"]
    problems, accepted = [], {}
    for entry in entries:
        check = entry.get("check", "?")
        if not str(entry.get("reason", "")).strip():
            problems.append(f"{path}: {check} has no reason")
        for resource in entry.get("resources", []):
            accepted[(check, resource)] = entry
    return accepted, problems


def main():
    skips_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "infra/checkov/skips.yaml")
    accepted, problems = load_skips(skips_path)
    passed, failed = run_checkov()
    used = set()
    unlisted = []
    for finding in failed:
        # "AWS::Serverless::Function.PurchaseFunction" -> "PurchaseFunction"
        logical_id = finding["resource"].rsplit(".", 1)[-1]
        key = (finding["check_id"], logical_id)
        if key in accepted:
            used.add(key)
        else:
            first, last = finding.get("file_line_range") or [0, 0]
            unlisted.append(
                f"{finding['check_id']} {finding['check_name']}\n"
                f"    {finding['resource']} ({finding['file_path'].lstrip('/')}:{first}-{last})"
            )
    stale = sorted(f"{check} {resource}" for (check, resource) in accepted if (check, resource) not in used)
    temporary = sorted({f"{check}" for (check, _), entry in accepted.items() if entry.get("temporary")})
    for line in unlisted:
        problems.append(f"not accepted in {os.path.relpath(skips_path, ROOT)}: {line}")
    for line in stale:
        problems.append(f"listed but no longer found (remove it): {line}")
    print(
        f"checkov: {passed} checks passed, {len(used)} findings accepted "
        f"({os.path.relpath(skips_path, ROOT)}; temporary: {', '.join(temporary) or 'none'}), "
        f"{len(unlisted)} not accepted, {len(stale)} stale skips"
    )
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
