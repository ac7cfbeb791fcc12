#!/bin/sh
# test_vendor.sh - clnode-devices and clnode-compare on a machine without any OpenCL device: the
# ICD loader is pointed at a folder that does not exist, so only the host (and CUDA, if a driver
# is present) remains. Both tools must still work, say that OpenCL has no device, and the host rows
# of the comparison must agree with the reference.
#
#   test_vendor.sh CLNODE_DEVICES CLNODE_COMPARE
set -u
devices=$1
compare=$2
OCL_ICD_VENDORS=/nonexistent
export OCL_ICD_VENDORS

out=$("$devices" --no-probe) || { echo "$out"; echo "FAIL: clnode-devices exited with $?"; exit 1; }
echo "$out"
case $out in
*"no OpenCL platform or device found"* | *"not built"*) ;;
*) echo "FAIL: clnode-devices does not say that there is no OpenCL device"; exit 1 ;;
esac

out=$("$compare" --batches 1,2)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: clnode-compare exited with $rc"; exit 1; }
if echo "$out" | grep -q '^opencl:[0-9]'; then
    echo "FAIL: clnode-compare ran an OpenCL device although none exists"
    exit 1
fi
case $out in
*"no OpenCL platform or device found"* | *"opencl: not built"*) ;;
*) echo "FAIL: clnode-compare does not say that there is no OpenCL device"; exit 1 ;;
esac
echo "OK"
