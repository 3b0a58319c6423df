// What the column GEMVs of kernels/csrc (cols_gemv.cu on CUDA cores, cols_gemv_mma.cu on tensor cores) share:
// their parameter block (mirrored by kernels.cols_gemv._Params), the LM head's ordered argmax key and the LM head
// launch's end (the last CTA reads and resets the per-column votes, accepts the draft's agreeing prefix and feeds
// its token: kernels.lm_head_mma_cols' contract). Needs MODE, KDIM, WKIND and NT defined by the including kernel.
#define NC 16                                // columns of the LM head's scratch (kernels.gemv_mma_cols.NC)

struct Params {  // mirrored by _Params in kernels/cols_gemv.py
  const u32* w; const float* act; const void* norm_w; const void* bias; float* out;
  long long* scratch; const long long* draft; const long long* klen; long long* token; int* pos;
  const u16* embed; float* x_next; long long* result; long long* ring;
  int ring_size; int units; int groups; int ncols; float eps;
};

// A column's best (value, lowest row) as kernels.lm_head_argmax's ordered int64 key.
__device__ __forceinline__ long long argmax_key(float v, int row) {
  const int bits = __float_as_int(v);
  const int ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF);
  return ((long long)ordered << 32) + (long long)(2147483647 - row);
}

#if MODE == 3
// After each CTA's atomicMax of its per-column best into scratch[0..NC): the last CTA to finish (a ticket in
// scratch[NC]) takes the winners, resets the votes and the ticket, and accepts / feeds the token.
__device__ __forceinline__ void cols_head_finish(const Params& prm, int tid) {
  __shared__ int last_s;
  __shared__ long long token_s;
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    const unsigned long long t = atomicAdd((unsigned long long*)(prm.scratch + NC), 1ull);
    last_s = t == (unsigned long long)(gridDim.x - 1);
  }
  __syncthreads();
  if (!last_s) return;
  __threadfence();
  __shared__ long long g_s[NC];
  __shared__ int agree_s[NC];
  if (tid < prm.ncols) {  // the last CTA: read and reset the votes (a thread per column), compare with the draft
    const long long won = atomicExch((unsigned long long*)(prm.scratch + tid), (unsigned long long)(-9223372036854775807LL - 1));
    const long long g = 2147483647LL - (won & 0xFFFFFFFFLL);
    g_s[tid] = g;
    agree_s[tid] = prm.draft && tid < prm.ncols - 1 && tid < *prm.klen && prm.draft[tid] == g;
    if (prm.result) prm.result[tid] = g;
  }
  __syncthreads();
  if (tid == 0) {  // accept the agreeing prefix, feed its token
    prm.scratch[NC] = 0;
    int a = 0;
    while (a < prm.ncols - 1 && agree_s[a]) ++a;
    const long long token = g_s[a];
    if (prm.result) prm.result[prm.ncols] = a;
    *prm.token = token;
    const int new_pos = *prm.pos + a + 1;
    *prm.pos = new_pos;
    if (prm.ring) prm.ring[new_pos % prm.ring_size] = token;
    token_s = token;
  }
  __syncthreads();
  const u16* e = prm.embed + token_s * KDIM;
  for (int k = tid; k < KDIM; k += NT) prm.x_next[k] = WKIND == 1 ? h2f(e[k]) : __uint_as_float((u32)e[k] << 16);
}
#endif
