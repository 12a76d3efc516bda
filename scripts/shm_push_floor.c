/*
 * The floor under a 2-rank all-reduce on one host's shared memory, beside Open MPI's
 * MPI_Allreduce in the same run (their batches taking turns; medians of 15).
 *
 * "push" is the protocol sycl-rs's host steps run (spec/collectives.md, push steps), written
 * by hand with nothing around it: each rank copies its values into its slot in the peer's
 * half (two halves, taken in turn), raises a flag there (release), waits for the peer's flag
 * in its own (acquire) and sums its own values with the peer's. No queue, event, admission
 * or plan: what is left is the memory traffic between the two cores, which no protocol that
 * moves the bytes avoids. Where "push/mpi" is near 1, Open MPI is at that floor too.
 *
 *   mpicc -O2 -mavx2 scripts/shm_push_floor.c -o /tmp/shm_push_floor
 *   mpirun -np 2 /tmp/shm_push_floor
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define REPS 15
#define ITERS 4000
#define HALF (1 << 16)               /* bytes per half of a rank's inbox */
#define PER_RANK (4096 + 2 * HALF)   /* a page of flags, then the two halves */

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v) {
    qsort(v, REPS, sizeof *v, by_value);
    return v[REPS / 2];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 2) {
        if (me == 0) fprintf(stderr, "shm_push_floor: run it with 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    char name[64];
    int job = 0;
    if (me == 0) job = (int)getpid();
    MPI_Bcast(&job, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "/shm_push_floor.%d", job);
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 2 * PER_RANK) != 0) {
        perror("shm_push_floor: shared memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char *base = mmap(NULL, 2 * PER_RANK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        perror("shm_push_floor: mmap");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) shm_unlink(name);
    char *mine = base + me * PER_RANK, *peer = base + (1 - me) * PER_RANK;
    /* One flag per half, each in a cache line of its own. */
    uint64_t *my_flag = (uint64_t *)mine, *peer_flag = (uint64_t *)peer;
    uint64_t epoch = 0;

    const int sizes[] = {512, 1024, 2048, 4096, 16384, 65536};
    if (me == 0) printf("# bytes  push_us  mpi_us  push/mpi (median of %d batches of %d)\n", REPS, ITERS);
    for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int bytes = sizes[s], count = bytes / 4;
        float *x = aligned_alloc(64, bytes), *y = aligned_alloc(64, bytes);
        for (int i = 0; i < count; i++) x[i] = 1.0f;
        double push[REPS], mpi[REPS], ratio[REPS];
        for (int rep = 0; rep < REPS; rep++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t = now_us();
            for (int it = 0; it < ITERS; it++) {
                epoch++;
                int h = epoch & 1;
                memcpy(peer + 4096 + h * HALF, x, bytes);
                __atomic_store_n(&peer_flag[8 * h], epoch, __ATOMIC_RELEASE);
                while (__atomic_load_n(&my_flag[8 * h], __ATOMIC_ACQUIRE) < epoch)
                    __builtin_ia32_pause();
                const float *in = (const float *)(mine + 4096 + h * HALF);
                /* In place, as the bench's all-reduce; `* 0` keeps the values finite. */
                for (int i = 0; i < count; i++) x[i] = x[i] + in[i] * 0.0f;
            }
            push[rep] = (now_us() - t) / ITERS;
            MPI_Barrier(MPI_COMM_WORLD);
            t = now_us();
            for (int it = 0; it < ITERS; it++)
                MPI_Allreduce(x, y, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            mpi[rep] = (now_us() - t) / ITERS;
            ratio[rep] = push[rep] / mpi[rep];
        }
        if (me == 0)
            printf("%7d  %7.3f  %6.3f  %8.3f\n", bytes, median(push), median(mpi), median(ratio));
        free(x);
        free(y);
    }
    munmap(base, 2 * PER_RANK);
    close(fd);
    MPI_Finalize();
    return 0;
}
