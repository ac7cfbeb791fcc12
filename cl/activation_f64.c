/* activation_f64.c - the double instance of cl/activation_inst.inc. */
#define CLN_PRECISION 64
#include "activation_inst.inc"
