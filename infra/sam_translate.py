"""Translates template.yaml into the CloudFormation that `sam deploy` creates,
offline, and prints it as JSON: the functions' IAM roles with every SAM
policy template and managed policy resolved, as AWS will see them.

    .venv/bin/python infra/sam_translate.py template.yaml

The IAM test (tests/iam.rs) reads roles from this output rather than from
template.yaml, so a grant that only a SAM policy template or an event source
adds (the SQS event's managed AWSLambdaSQSQueueExecutionRole, say) is checked
too. `sam validate` does the same translation; it needs no AWS account.
"""

import json
import os
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

# The managed policies SAM may attach, by name: the translation asks IAM for
# their ARNs unless given them (these are AWS's own, the same in every account).
MANAGED = {
    "AWSLambdaBasicExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    "AWSLambdaVPCAccessExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole",
    "AWSLambdaSQSQueueExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole",
    "AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
}


class Managed:
    def load(self):
        return MANAGED


def main():
    with open(sys.argv[1]) as f:
        template = yaml_parse(f.read())
    # The translation checks CodeUri is an S3 location, as it is after
    # `sam package`; the code is irrelevant to IAM.
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource.setdefault("Properties", {})["CodeUri"] = "s3://bucket/key"
        if resource.get("Type") == "AWS::Serverless::Application":
            resource.setdefault("Properties", {})["Location"] = "https://s3.amazonaws.com/bucket/key"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    out = transform(template, {"AWS::Region": os.environ["AWS_DEFAULT_REGION"]}, Managed())
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
