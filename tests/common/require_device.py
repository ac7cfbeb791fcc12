#!/usr/bin/env python3
"""require_device.py DEVICE WHY - stands for the tests of DEVICE where the build found no such
device (WHY says what is missing): exits 77 (meson: skipped), or 1 naming the device where
CLNODE_REQUIRE_DEVICES lists it (the rule of tests/common/test_device.h: an entry equal to the
device, or a bare backend on either side that matches the other's backend)."""
import os
import sys


def required(device):
    for entry in filter(None, os.environ.get("CLNODE_REQUIRE_DEVICES", "").split(",")):
        if entry == device or (":" not in entry or ":" not in device) and \
                entry.split(":")[0] == device.split(":")[0]:
            return True
    return False


if __name__ == "__main__":
    device, why = sys.argv[1], sys.argv[2]
    if required(device):
        print("FAIL: device %s is required here (CLNODE_REQUIRE_DEVICES=%s) but not available: %s"
              % (device, os.environ["CLNODE_REQUIRE_DEVICES"], why))
        sys.exit(1)
    print("device %s is not available here (%s): skipped" % (device, why))
    sys.exit(77)
