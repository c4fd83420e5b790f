// Benchmark only: the cost of one dispatch. Each dispatch adds 1 to a counter that the next one reads, so the GPU
// must finish one before it starts the next (a barrier between them, as between the dependent kernels of a model's
// layers), and its work is nothing beside that: what a run of them takes per dispatch is the adapter's launch and
// barrier cost. The final count says every dispatch ran.

@group(0) @binding(0) var<storage, read_write> count: array<u32>; // (1)

@compute @workgroup_size(1)
fn main() {
  count[0] = count[0] + 1u;
}
