"""The Linux NFS client, READ (no NFS client runs here): what the verifier's digest key (size, mtime,
ctime, inode; components/scripts/verify_model.py file_key) relies on when modelVolume.kind is nfs.

The key changes whenever the sync Job replaces a file: the AWS CLI renames a new inode into place
(tests/upstream_aws_cli.py), so the inode number (the server's fileid, unique among live files)
differs. What could go wrong is reading a stale key, from the client's caches:
"""

from __future__ import annotations

PORTED_FROM = (
    {"repo": "nfs-utils", "release": None, "untagged": "the nfs(5) man page, no version recorded",
     "files": ("utils/mount/nfs.man",), "not_deployed": "the nodes' NFS client, which the stacks do not pin"},
    {"repo": "torvalds/linux", "release": None, "untagged": "read in a 5.x/6.x-era copy",
     "files": ("fs/nfs/dir.c",), "not_deployed": "the nodes' kernel, which the stacks do not pin"},
)

READ = (
    # stat() may answer from the attribute cache (acregmin 3 s .. acregmax 60 s), and with the
    # default lookupcache=all a cached directory entry is trusted until the parent directory's
    # cached attributes expire: a name replaced from another node may still show the old inode.
    "nfs-utils utils/mount/nfs.man, nfs(5): DATA AND METADATA COHERENCE, 'Attribute caching' "
    "(ac, acregmin/acregmax) and 'Directory entry caching' (lookupcache)",
    # open() revalidates: the client sends GETATTR 'regardless of the freshness of the file's cached
    # attributes' (close-to-open), unless the mount says nocto. So the key is fstat() of an open file.
    "nfs-utils utils/mount/nfs.man, nfs(5): 'Close-to-open cache consistency'",
    "Linux fs/nfs/dir.c nfs_lookup_verify_inode: '/* This is an open(2) */' with LOOKUP_OPEN and no "
    "NFS_MOUNT_NOCTO goes to __nfs_revalidate_inode, a GETATTR on the wire (read in a 5.x/6.x-era copy; a "
    "replaced file's old handle then answers ESTALE and the name is looked up again)",
    # The rendered NFS PersistentVolumes set no mountOptions (components/volume.py): cto holds. An
    # existingClaim mounted with nocto loses it: a replacement made from another node (an earlier
    # pod of the Job) could go unseen for up to acregmax; the Job's own replacements are always seen
    # (one pod, one client, which updates its caches with its own renames).
)
