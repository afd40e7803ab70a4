#!/usr/bin/env python3
"""Unpacks the files of Debian packages into a folder, as `dpkg -x` does, with Python alone (a GPU
machine may have neither dpkg nor apt). A .deb is an ar archive whose data.tar.* member holds the
files.

    python3 scripts/gpu-probes/unpack_deb.py DEST PACKAGE.deb...
"""
import io
import sys
import tarfile


def data_member(path):
    with open(path, "rb") as f:
        blob = f.read()
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError(f"{path}: not an ar archive (no !<arch> magic)")
    pos = 8
    while pos + 60 <= len(blob):
        header = blob[pos:pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        start = pos + 60
        if name.startswith("data.tar"):
            return blob[start:start + size]
        pos = start + size + (size & 1)
    raise ValueError(f"{path}: no data.tar member")


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    dest = sys.argv[1]
    for path in sys.argv[2:]:
        with tarfile.open(fileobj=io.BytesIO(data_member(path)), mode="r:*") as tar:
            members = [m for m in tar.getmembers() if not m.name.startswith(("/", "..")) and ".." not in m.name.split("/")]
            if hasattr(tarfile, "data_filter"):  # Python 3.12+: also refuses links that leave dest
                tar.extractall(dest, members=members, filter="data")
            else:
                tar.extractall(dest, members=members)
    return 0


if __name__ == "__main__":
    sys.exit(main())
