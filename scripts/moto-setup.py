#!/usr/bin/env python3
"""Prepares a fresh moto_server (started with INITIAL_NO_AUTH_ACTION_COUNT
set to 3 + the number of buckets, so that only these setup requests go
unsigned): waits for its port, makes an IAM user that may do anything, its
access key and policy, and the buckets; prints the key ID and the secret,
separated by a space, last. Every later request must be signed with that
key. Used by the tests' MotoServer (Tests/TestSupport/MotoServer.swift)
and scripts/fleet-chaos --store s3 (scripts/fleet/fleetlib.py).

    moto-setup.py ENDPOINT USER BUCKET...
"""
import json
import socket
import sys
import time

import boto3

endpoint, user, buckets = sys.argv[1], sys.argv[2], sys.argv[3:]
host, port = endpoint.rsplit("/", 1)[1].split(":")
deadline = time.time() + 30
while True:
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("moto_server did not listen on " + endpoint)
        time.sleep(0.1)
options = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **options)
iam.create_user(UserName=user)
key = iam.create_access_key(UserName=user)["AccessKey"]
iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
s3 = boto3.client("s3", **options)
for bucket in buckets:
    s3.create_bucket(Bucket=bucket)
print(key["AccessKeyId"], key["SecretAccessKey"])
