"""Builds the gpupipe package. Its gpupipe.v1 modules are generated first from the API in
proto/ (gen_stubs.py, through protoc's descriptor output), so protoc must be on PATH (Debian:
protobuf-compiler)."""
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


def generate_stubs():
    target = os.path.join(HERE, "gpupipe", "v1")
    if not os.path.isdir(PROTO_DIR):
        if os.path.isdir(target):
            return  # an sdist: generated already
        sys.exit(f"gpupipe: {PROTO_DIR} is missing; build from the gpupipe source tree")
    protoc = shutil.which("protoc")
    if protoc is None:
        sys.exit("gpupipe: protoc is needed to build the package (apt install protobuf-compiler)")
    with tempfile.TemporaryDirectory() as tmp:
        desc = os.path.join(tmp, "gpupipe.desc")
        subprocess.check_call([protoc, "--proto_path=" + PROTO_DIR,
                               "--descriptor_set_out=" + desc, "gpupipe/v1/gpupipe.proto"])
        subprocess.check_call([sys.executable, os.path.join(HERE, "gen_stubs.py"), desc, tmp])
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(os.path.join(tmp, "gpupipe", "v1")):
            shutil.copy(os.path.join(tmp, "gpupipe", "v1", name), target)


generate_stubs()
setup()
