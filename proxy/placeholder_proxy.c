/* placeholder: replaced when proxy/ lands */
typedef int lp_placeholder_proxy;
