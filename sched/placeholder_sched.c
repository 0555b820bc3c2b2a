/* placeholder: replaced when sched/ lands */
typedef int lp_placeholder_sched;
