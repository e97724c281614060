// A one-thread kernel that keeps the GPU busy for a given time. The timing harness queues it
// just before the first timing event, so the host has enqueued the whole timed region by the
// time the GPU reaches it, and the host's launch overhead stays outside the measurement.

extern "C" __global__ void hold_gpu(unsigned long long duration_ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < duration_ns);
}
