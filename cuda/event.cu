/* event.cu - CUDA events for ampc.cuda.Event: recorded on the ampc stream
 * of the current device, queried, waited for by the host or by the stream,
 * and timed.  The C side (csrc/cuda_event.c) makes the event's device
 * current before each call and refuses the calls that a graph capture
 * cannot hold.
 */
#include "common.cuh"

extern "C" int
ampc_event_create_cuda(int timing, int blocking, void **event)
{
    unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
    if (blocking) {
        flags |= cudaEventBlockingSync;
    }
    cudaEvent_t ev = NULL;
    AMPC_CUDA_CHECK(cudaEventCreateWithFlags(&ev, flags));
    *event = (void *)ev;
    return 0;
}

extern "C" int
ampc_event_destroy_cuda(void *event)
{
    AMPC_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)event));
    return 0;
}

extern "C" int
ampc_event_record_cuda(void *event)
{
    AMPC_CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, ampc_cuda_stream()));
    return 0;
}

extern "C" int
ampc_event_wait_cuda(void *event)
{
    AMPC_CUDA_CHECK(
        cudaStreamWaitEvent(ampc_cuda_stream(), (cudaEvent_t)event, 0));
    return 0;
}

extern "C" int
ampc_event_query_cuda(void *event, int *done)
{
    cudaError_t err = cudaEventQuery((cudaEvent_t)event);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();       /* not an error: still running */
        *done = 0;
        return 0;
    }
    AMPC_CUDA_CHECK(err);
    *done = 1;
    return 0;
}

extern "C" int
ampc_event_synchronize_cuda(void *event)
{
    AMPC_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
    return 0;
}

extern "C" int
ampc_event_elapsed_cuda(void *start, void *end, float *ms)
{
    AMPC_CUDA_CHECK(
        cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
    return 0;
}
