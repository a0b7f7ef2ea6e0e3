/* LTTng-UST 2.13 tracepoint provider for the benchmark: one event with two 32-bit ints. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER htbench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./htbench_tp.h"

#if !defined(HTBENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define HTBENCH_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(htbench, ints,
    LTTNG_UST_TP_ARGS(int, a, int, b),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int, a, a)
        lttng_ust_field_integer(int, b, b)
    )
)

#endif

#include <lttng/tracepoint-event.h>
