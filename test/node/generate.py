#!/usr/bin/python3
# generate.py OUTDIR - write the official ONNX backend node tests into OUTDIR/node/test_*/
# (model.onnx, test_data_set_0/{input,output}_N.pb).
#
# Needs Debian's python3-onnx (1.12) run by /usr/bin/python3.  Bookworm's numpy 1.24 dropped
# the numpy.float/int/bool/object aliases that onnx 1.12's test generators still use, so they
# are restored before onnx is imported.  Called by test/node/gen.sh.
import sys

import numpy

for _name, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _name not in vars(numpy):  # checked without getattr, which warns for these names
        setattr(numpy, _name, _type)

from onnx.backend.test import cmd_tools  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: generate.py OUTDIR\n")
        return 2
    sys.argv = [sys.argv[0], "generate-data", "-o", sys.argv[1]]
    cmd_tools.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
