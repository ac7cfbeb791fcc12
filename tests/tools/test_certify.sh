#!/bin/sh
# test_certify.sh - clnode-solve --certify and clnode-compare's sensitivity verdicts from the
# command line: the seed problem in strict fp32 is certified (exit 0, the certificate in the
# JSON), in emulated TF32 it is not (exit 4, every sample beyond its band and rtol); a bad
# fraction is a usage error (exit 2); clnode-compare's JSON judges the strict row as agreeing
# with the problem's own rounding spread and the tf32 row as beyond it.
#
#   test_certify.sh CLNODE_SOLVE CLNODE_COMPARE
set -u
solve=$1
compare=$2

out=$("$solve" --batch 200 --certify --certify-fraction 0.02 --json)
rc=$?
[ $rc -eq 0 ] || { echo "$out"; echo "FAIL: strict --certify exited with $rc, not 0"; exit 1; }
echo "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["certificate"]
assert c["certified"] is True, c
assert c["num_sampled"] == 4 and len(c["samples"]) == 4, c
assert all(s["within"] and s["complete"] for s in c["samples"]), c
assert c["max_deviation_rtol"] <= c["tolerance_rtol"], c
print("strict: certified,", c["num_sampled"], "samples, max deviation", c["max_deviation_rtol"], "rtol")
' || { echo "FAIL: strict certificate JSON"; exit 1; }

out=$("$solve" --batch 20 --certify --certify-fraction 0.1 --gemm-precision tf32 \
      --precision-guard off)
rc=$?
echo "$out" | tail -4
[ $rc -eq 4 ] || { echo "FAIL: tf32 --certify exited with $rc, not 4"; exit 1; }
case $out in
*"NOT CERTIFIED"*) ;;
*) echo "FAIL: the tf32 run does not say NOT CERTIFIED"; exit 1 ;;
esac

"$solve" --certify-fraction 0 >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: --certify-fraction 0 exited with $rc, not 2"; exit 1; }

out=$("$compare" --devices host --batches 1 --json)
rc=$?
[ $rc -eq 0 ] || { echo "$out"; echo "FAIL: clnode-compare exited with $rc"; exit 1; }
echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
b = d["sensitivity"]["fp32"]
assert b["steps"][0] <= 14 <= b["steps"][1] and not b["ill_conditioned"], b
rows = {(r["precision"], r["gemm_precision"]): r for r in d["rows"]}
s = rows[("fp32", "strict")]["sensitivity"]
assert s["judgement"]["verdict"] == "agrees" and s["certified"], s
t = rows[("fp32", "tf32")]["sensitivity"]
assert t["judgement"]["verdict"] == "beyond" and t["judgement"]["ratio"] > 3, t
assert not t["certified"], t
print("compare: strict agrees (%.2gx), tf32 beyond (%.3gx)" % (s["judgement"]["ratio"],
      t["judgement"]["ratio"]))
' || { echo "FAIL: clnode-compare sensitivity JSON"; exit 1; }
echo OK
