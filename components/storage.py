"""The weights bucket and its read-only credentials (field report 3.2).

Created buckets are versioned, encrypted and closed to the public; outside dev they are protected
and retained on delete, so `pulumi destroy` never loses 156 GiB of verified weights. Credentials
created here can only list and read the model prefixes of this one bucket.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.base import Component
from config_model import ObjectStore


def read_only_policy(bucket: str, prefixes: list[str]) -> str:
    """IAM policy JSON: list the model prefixes and get their objects, nothing else."""
    objects = [f"arn:aws:s3:::{bucket}/{p}/*" for p in sorted(set(prefixes))]
    listable = sorted({f"{p}/*" for p in prefixes} | set(prefixes) | {f"{p}/" for p in prefixes})
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ListModelPrefixes", "Effect": "Allow", "Action": ["s3:ListBucket"],
             "Resource": [f"arn:aws:s3:::{bucket}"],
             "Condition": {"StringLike": {"s3:prefix": listable}}},
            {"Sid": "ReadModelObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": objects},
        ],
    }, sort_keys=True)


@dataclass(frozen=True)
class ModelStoreArgs:
    store: ObjectStore
    model_prefixes: list[str]
    protect_data: bool          # true outside dev
    user_name: str              # the IAM reader, config_model.derived.iam_user_name


class ModelStore(Component):
    bucket_name: pulumi.Output[str]
    access_key_id: pulumi.Output[str] | None = None
    secret_access_key: pulumi.Output[str] | None = None

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:storage:ModelStore", name, opts)
        store = args.store
        if store.create:
            # Outside dev every resource that configures the bucket is protected and retained as well:
            # `pulumi destroy` would otherwise delete the versioning, encryption and public-access
            # block before it reached the protected bucket, leaving it unversioned and exposed.
            keep = {"protect": args.protect_data, "retain_on_delete": args.protect_data}
            self.bucket = aws.s3.Bucket(
                f"{name}-bucket", bucket=store.bucket_name, force_destroy=False, opts=self.child_opts(**keep))
            bucket_id = self.bucket.id
            self.bucket_name = self.bucket.bucket
            aws.s3.BucketVersioning(
                f"{name}-versioning", bucket=bucket_id,
                versioning_configuration={"status": "Enabled"}, opts=self.child_opts(**keep))
            sse = ({"sse_algorithm": "aws:kms", "kms_master_key_id": store.kms_key_arn}
                   if store.kms_key_arn else {"sse_algorithm": "AES256"})
            aws.s3.BucketServerSideEncryptionConfiguration(
                f"{name}-encryption", bucket=bucket_id,
                rules=[{"apply_server_side_encryption_by_default": sse, "bucket_key_enabled": bool(store.kms_key_arn)}],
                opts=self.child_opts(**keep))
            aws.s3.BucketPublicAccessBlock(
                f"{name}-public-access-block", bucket=bucket_id,
                block_public_acls=True, block_public_policy=True,
                ignore_public_acls=True, restrict_public_buckets=True, opts=self.child_opts(**keep))
        else:
            self.bucket_name = pulumi.Output.from_input(store.bucket_name)

        if store.create_credentials:
            user = aws.iam.User(f"{name}-reader", name=args.user_name,
                                tags={"purpose": "llm-serving model sync, read-only"}, opts=self.child_opts())
            aws.iam.UserPolicy(f"{name}-reader-policy", user=user.name,
                               policy=self.bucket_name.apply(lambda b: read_only_policy(b, args.model_prefixes)),
                               opts=self.child_opts())
            key = aws.iam.AccessKey(f"{name}-reader-key", user=user.name, opts=self.child_opts())
            self.access_key_id = pulumi.Output.secret(key.id)
            self.secret_access_key = pulumi.Output.secret(key.secret)
        self.register_outputs({"bucketName": self.bucket_name})
