"""The AWS CLI the sync Job runs, and the file systems its model volume may be, as far as the verifier
relies on them (components/scripts/verify_model.py): the one place to re-check on a bump.

RUN here: awscli 1.46.2 and s3transfer 0.19.3 (requirements-s3.txt, .venv-s3; github.com/aws/aws-cli
tag 1.46.2, github.com/boto/s3transfer tag 0.19.3). SOURCE holds the lines of their installed files
the verifier's assumptions rest on; tests/test_sync_real.py checks them against the installed files
and watches the real CLI keep a held object under a temporary name.

The pod runs AWS CLI v2 instead (images.modelSync: amazon/aws-cli): V2_READ holds what was read, not
run, in github.com/aws/aws-cli tag 2.36.7 (commit 73fb33bb171ace3e9eaa03308f76e5de50c21393, the v2
branch): the same temporary name, rename and utime, for both of its transfer clients.

What the file systems under the model volume add is read, not run: tests/upstream_nfs.py and
tests/upstream_ceph.py.
"""

from __future__ import annotations

from dataclasses import dataclass

AWSCLI = "1.46.2"
S3TRANSFER = "0.19.3"


@dataclass(frozen=True)
class Line:
    package: str     # top-level package directory in site-packages
    path: str        # file inside it
    text: str        # a line (stripped) the file must contain
    why: str


SOURCE = (
    # A file under its final name is complete: every object is written to a temporary name beside
    # the target and renamed into place by the transfer's final task.
    Line("s3transfer", "download.py", "self._temp_filename = self._osutil.get_temp_filename(fileobj)",
         "DownloadFilenameOutputManager.get_fileobj_for_io_writes: writes go to a temporary file"),
    Line("s3transfer", "download.py", "osutil.rename_file(fileobj.name, final_filename)",
         "IORenameFileTask._main, the final I/O task (is_final=True): renamed once all writes are done"),
    Line("s3transfer", "utils.py", "suffix = os.extsep + random_file_extension()",
         "OSUtils.get_temp_filename: <name>.<8 random hex digits> in the same directory"),
    Line("s3transfer", "compat.py", "rename_file = os.rename",
         "rename_file on Linux is rename(2): atomic within one file system, the target replaced whole"),
    # Then the mtime is the object's: a replaced file may keep size and mtime, never inode and ctime.
    Line("awscli", "customizations/s3/utils.py", "set_file_utime(filename, int(mod_timestamp))",
         "ProvideLastModifiedTimeSubscriber._on_success: utime to the object's LastModified after the rename"),
    Line("awscli", "customizations/s3/s3handler.py",
         "# The result subscriber class should always be the last registered",
         "the utime subscriber runs before the result is reported, in subscriber order"),
    # A dry run (sync_model.sh, on a verified revision) transfers and deletes nothing, and reports each
    # operation on stdout as "(dryrun) <type>: <location>"; --only-show-errors silences successes and
    # progress, not those (OnlyShowErrorsResultPrinter overrides _print_success and _print_progress only;
    # tests/test_day2_storage.py sees the line for a changed file through --only-show-errors).
    Line("awscli", "customizations/s3/s3handler.py", "self._submit_dryrun(fileinfo)",
         "BaseTransferRequestSubmitter._submit: with --dryrun, no transfer request is submitted"),
    Line("awscli", "customizations/s3/results.py", "DRY_RUN_FORMAT = u'(dryrun) ' + SUCCESS_FORMAT",
         "ResultPrinter: the dry-run line"),
    Line("awscli", "customizations/s3/results.py", "DryRunResult: self._print_dry_run,",
         "ResultPrinter._result_handler_map: dry-run results print through _print_dry_run, to the out file"),
    # The retries the sync Job renders (components/sync_job.py RETRY_ENV), in the botocore and s3transfer
    # awscli 1.46.2 carries inside itself and imports; v2 at tag 2.36.7 holds the same lines, and there
    # AWS_RETRY_MODE and AWS_MAX_ATTEMPTS default to standard and 3 (awscli/botocore/configprovider.py).
    Line("awscli", "botocore/configprovider.py", "'retry_mode': ('retry_mode', 'AWS_RETRY_MODE', _DEFAULT_RETRY_MODE, None),",
         "AWS_RETRY_MODE is read (v1's default: legacy, 5 attempts; the Job says standard)"),
    Line("awscli", "botocore/configprovider.py", "'max_attempts': ('max_attempts', 'AWS_MAX_ATTEMPTS', None, int),",
         "AWS_MAX_ATTEMPTS is read: attempts of each request, the first included"),
    Line("awscli", "botocore/retries/standard.py", "'SlowDown',",
         "ThrottledRetryableChecker: S3's 503 SlowDown is retried in mode standard (tests/test_sync_faults.py)"),
    Line("awscli", "botocore/retries/standard.py", "_TRANSIENT_STATUS_CODES = [500, 502, 503, 504]",
         "TransientRetryableChecker: 5xx answers, and ConnectionError, are retried in mode standard"),
    Line("awscli", "s3transfer/manager.py", "num_download_attempts=5,",
         "TransferConfig: a GET whose body breaks off (reset, short read) is retried 5 times"),
)


# objectStore.workloadIdentity (IRSA, components/sync_job.py credentials): the CLI's web-identity
# provider reads the role and the token file from these variables. RUN: awscli/botocore/credentials.py,
# the botocore awscli 1.46.2 carries inside itself and imports (not the botocore beside it in
# requirements-s3.txt), checked and run by tests/test_workload_identity.py. READ (v2, the
# pod's image): awscli/botocore/credentials.py of github.com/aws/aws-cli v2 branch (commit
# 0130e1d43617d905efebb7e156f51f2a3584d665) holds the same AssumeRoleWithWebIdentityProvider with the same
# _CONFIG_TO_ENV_VAR, and create_credential_resolver puts the profile providers, web identity first,
# ahead of the shared-credentials file and the container and instance-metadata providers.
CREDENTIAL_CHAIN = (
    "class AssumeRoleWithWebIdentityProvider(CredentialProvider):",
    "'web_identity_token_file': 'AWS_WEB_IDENTITY_TOKEN_FILE',",
    "'role_arn': 'AWS_ROLE_ARN',",
    "self._create_web_identity_provider(",
)

# objectStore.workloadIdentity kind podIdentity (EKS Pod Identity): EKS injects
# AWS_CONTAINER_CREDENTIALS_FULL_URI (http://169.254.170.23/v1/credentials, the node's Pod Identity Agent)
# and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE; the CLI's container provider reads them, sends the file's
# token as the Authorization header and accepts that host besides loopback. RUN: the same awscli 1.46.2
# files, tests/test_pod_identity.py (path, text). In create_credential_resolver the container provider
# comes after the environment, assume-role and profile providers (web identity, the shared-credentials and
# config files) and before instance metadata, so none of what the Job sets takes precedence. NOT READ for
# the v2 image at V2_TAG: the sync image is pinned by digest alone (_V2_UNNAMED below).
CONTAINER_PROVIDER = (
    ("credentials.py", "ENV_VAR_FULL = 'AWS_CONTAINER_CREDENTIALS_FULL_URI'"),
    ("credentials.py", "ENV_VAR_AUTH_TOKEN_FILE = 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE'"),
    ("credentials.py", "return {'Authorization': auth_token}"),
    ("credentials.py", "post_profile = [\n        OriginalEC2Provider(),\n        BotoProvider(),\n        container_provider,\n"
                       "        instance_metadata_provider,\n    ]"),
    ("utils.py", "'169.254.170.23',"),
)
# objectStore.caBundle (components/sync_job.py): AWS_CA_BUNDLE is the session's ca_bundle, which
# becomes the `verify` of every client the CLI creates. RUN: these lines of awscli 1.46.2's own botocore
# (awscli/botocore/), checked against the installed files and run over TLS by tests/test_sync_tls.py.
# READ (v2, the pod's image, at V2_COMMIT): the same configprovider.py entry and session.py
# create_client line, and awscli/customizations/s3/factory.py _create_crt_client passing
# 'verify': self._resolve_verify(params) (verify_ssl, else ca_bundle, else DEFAULT_CA_BUNDLE) to the
# CRT transfer client, so either transfer client verifies against the bundle.
CA_BUNDLE = (
    ("configprovider.py", "'ca_bundle': ('ca_bundle', 'AWS_CA_BUNDLE', None, None),"),
    ("session.py", "verify = self.get_config_variable('ca_bundle')"),
)

# Where the agent listens (EKS User Guide, "Understand how EKS Pod Identity works").
POD_IDENTITY_AGENT_URI = "http://169.254.170.23/v1/credentials"

V2_TAG = "2.36.7"
V2_COMMIT = "73fb33bb171ace3e9eaa03308f76e5de50c21393"
V2_READ = (
    # The image: docker/Dockerfile builds FROM public.ecr.aws/amazonlinux/amazonlinux:2023 (installs less,
    # groff, findutils, jq) with ENTRYPOINT /usr/local/bin/aws; the Job's command replaces it with /bin/sh.
    "docker/Dockerfile: FROM public.ecr.aws/amazonlinux/amazonlinux:2023",
    # s3transfer is vendored as awscli.s3transfer; the classic client is v1's.
    "awscli/s3transfer/download.py DownloadFilenameOutputManager.get_fileobj_for_io_writes: "
    "self._temp_filename = self._osutil.get_temp_filename(fileobj); IORenameFileTask._main: "
    "osutil.rename_file(fileobj.name, final_filename)",
    "awscli/s3transfer/utils.py OSUtils.get_temp_filename: <name>.<random_file_extension()> in the same directory",
    "awscli/s3transfer/compat.py: rename_file = os.rename (not Windows)",
    # The CRT client (customizations/s3/factory.py: preferred_transfer_client 'auto' picks it where
    # awscrt.s3.is_optimized_for_system()) also receives into a temporary name and renames it into place.
    "awscli/s3transfer/crt.py _get_make_request_args_download: recv_filepath = "
    "self._os_utils.get_temp_filename(final_filepath), RenameTempFileHandler in on_done_before_calls "
    "(rename_file on success, remove_file on error)",
    # utime to LastModified in whole seconds, after the transfer succeeded, for either client.
    "awscli/customizations/s3/subscribers.py ProvideLastModifiedTimeSubscriber._on_success: "
    "utils.set_file_utime(filename, int(mod_timestamp)); added by s3handler.py "
    "DownloadRequestSubmitter._add_additional_subscribers",
    # --dryrun (read in awscli/customizations/s3/results.py of the v2 style, commit 037f1c8a218f, not at
    # V2_TAG): DryRunResult is printed by _print_dry_run to stdout as "(dryrun) {transfer_type}:
    # {transfer_location}"; OnlyShowErrorsResultPrinter overrides _print_progress and _print_success only.
    "awscli/customizations/s3/results.py ResultPrinter._print_dry_run: DRY_RUN_FORMAT to the out file; "
    "OnlyShowErrorsResultPrinter keeps it",
)

# RUN: compared with the pins the sync tests install (requirements-s3.txt) by tests/test_upstream_releases.py.
# READ (v2): images.modelSync is amazon/aws-cli pinned by digest alone, so no stack file names the release
# the Job runs; the test checks that it still names none (a tag would have to be compared with V2_TAG).
_V2_UNNAMED = "images.modelSync is amazon/aws-cli pinned by digest alone: no stack file names the release it runs"
PORTED_FROM = (
    {"repo": "aws/aws-cli", "release": AWSCLI, "component": "awscli",
     "files": tuple(sorted({f"awscli/{line.path}" for line in SOURCE if line.package == "awscli"}))},
    {"repo": "boto/s3transfer", "release": S3TRANSFER, "component": "s3transfer",
     "files": tuple(sorted({f"s3transfer/{line.path}" for line in SOURCE if line.package == "s3transfer"}))},
    {"repo": "aws/aws-cli", "release": V2_TAG, "commit": V2_COMMIT, "not_deployed": _V2_UNNAMED,
     "files": ("docker/Dockerfile", "awscli/s3transfer/download.py", "awscli/s3transfer/utils.py",
               "awscli/s3transfer/compat.py", "awscli/s3transfer/crt.py", "awscli/customizations/s3/factory.py",
               "awscli/customizations/s3/subscribers.py", "awscli/customizations/s3/s3handler.py",
               "awscli/botocore/configprovider.py", "awscli/botocore/session.py")},
    {"repo": "aws/aws-cli", "release": None, "commit": "037f1c8a218f", "not_deployed": _V2_UNNAMED,
     "untagged": "the v2-style results.py read at a commit, not at V2_TAG",
     "files": ("awscli/customizations/s3/results.py",)},
)
