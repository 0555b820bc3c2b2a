/* placeholder: replaced when pool/ lands */
typedef int lp_placeholder_pool;
