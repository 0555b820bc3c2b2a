/* The clock's test seam (clock.h): NULL unless a simulator installs one. */
#include "common/clock.h"

#include <stddef.h>

const struct clock_fake *clock_fake = NULL;
