/* activation_f32.c - the float instance of cl/activation_inst.inc. */
#define CLN_PRECISION 32
#include "activation_inst.inc"
