// The test GPU: the process-wide Dawn device (a software Vulkan adapter in CI). Tests never skip for
// want of a GPU: if no adapter can be had, getting it throws and the test fails.
export { nodeGpu as testGpu } from '../../src/gpu/node.ts';
