"""Builds the gpupipe package. Its gpupipe.v1 modules are generated from the API in proto/
(gen_stubs.py, through protoc's descriptor output) into the build directory, never into the
source tree, where a stale copy would shadow the ones a build of the project generates; so
protoc must be on PATH (Debian: protobuf-compiler)."""
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


def generate_stubs(target):
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


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        if not os.path.isdir(PROTO_DIR):
            sys.exit(f"gpupipe: {PROTO_DIR} is missing; build from the gpupipe source tree")
        generate_stubs(os.path.join(self.build_lib, "gpupipe", "v1"))


setup(cmdclass={"build_py": BuildWithStubs})
