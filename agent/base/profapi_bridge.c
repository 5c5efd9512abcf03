/* The profiler API bridge (contract in profapi_bridge.h). */
#include "profapi_bridge.h"

#include "stepctl.h"

void meridian_profapi_call(int start)
{
    mrd_stepctl_profiler_call(start != 0);
}
