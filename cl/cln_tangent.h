/* cln_tangent.h - the tangent pass's element-wise arithmetic, written once for every backend:
 * the Jacobian-vector products of the vector field's pieces (clnode/tangent.h gives the
 * semantics: diffrax's ForwardMode with every step size held at its forward value).
 *
 * Valid as C11 and as OpenCL C (see cln_prelude.h). The step combinations need nothing new:
 * cln_stage_value, cln_y1 and cln_interpolate (cln_step.h) are linear in the state and the k_j,
 * with no constant term, for a fixed step and theta, so each is applied to the tangents as it is
 * to the values (dk_j = hd df_j, as k_j = hd f_j).
 */
#ifndef CLN_TANGENT_H
#define CLN_TANGENT_H

#include "cln_activation.h"
#include "cln_prelude.h"

/* The tangent of a layer's pre-activation x = W h + b: (W dh) + (dW h), then + db, in that order
 * (wdh: the product with the layer's weights, dwh: with their direction, db: the bias's
 * direction, 0 without one). */
CLN_INLINE real cln_tan_affine(real wdh, real dwh, real db)
{
    return (wdh + dwh) + db;
}

/* The tangent of an activation's output from its input's tangent dx and the derivative g =
 * act'(x) (cln_activate_grad), for a derivative computed once for every direction. */
CLN_INLINE real cln_tan_act_by(real g, real dx)
{
    return g * dx;
}

/* The tangent of an activation's output y = act(x) from its input's tangent dx: act'(x) dx
 * (cln_activate_grad), dx itself for the identity. */
CLN_INLINE real cln_tan_act(cln_int act, real x, real y, real dx)
{
    return act == CLN_ACT_IDENTITY ? dx : cln_tan_act_by(cln_activate_grad(act, x, y), dx);
}

/* The tangent of the output scale's product x s (cln_out_scale): dx s + x ds. */
CLN_INLINE real cln_tan_scale(real dx, real x, real s, real ds)
{
    return dx * s + x * ds;
}

#endif /* CLN_TANGENT_H */
