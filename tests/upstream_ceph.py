"""CephFS, READ (no Ceph client runs here): what the verifier's digest key (size, mtime, ctime, inode;
components/scripts/verify_model.py file_key) relies on when modelVolume.kind is cephfs.

The key changes whenever the sync Job replaces a file: the AWS CLI renames a new inode into place
(tests/upstream_aws_cli.py), and CephFS inode numbers are allocated by the MDS, unique among live
files. Reading the key is coherent across clients, so a key read on any node is the current one:
"""

from __future__ import annotations

PORTED_FROM = (
    {"repo": "ceph/ceph", "release": None, "untagged": "documentation, no version recorded",
     "files": ("doc/cephfs/mdcache.rst", "doc/cephfs/capabilities.rst"),
     "not_deployed": "the cluster's CephFS, which the stacks do not install or pin"},
    {"repo": "torvalds/linux", "release": None, "untagged": "no version recorded", "files": ("fs/ceph/caps.c",),
     "not_deployed": "the nodes' kernel, which the stacks do not pin"},
)

READ = (
    "ceph doc/cephfs/mdcache.rst (CephFS Distributed Metadata Cache): when another client needs the "
    "information, the MDS revokes the capability and the holder returns it with the updated inode metadata",
    "ceph doc/cephfs/capabilities.rst (Capabilities in CephFS): per-inode caps for the metadata parts "
    "(A, L, X, F); a client reads cached attributes only under a shared cap",
    "Linux fs/ceph/caps.c header comment: 'If the client holds a *_SHARED cap, the client has a coherent "
    "value that can be safely read from the cached inode'; a conflicting operation makes the MDS revoke it",
)
