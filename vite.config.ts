// Vite config for the studio (browser app + worker) and for Vitest (Node, real WebGPU through Dawn).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  base: './',
  worker: { format: 'es' },
  build: { target: 'es2022', chunkSizeWarningLimit: 4096 },
  server: { fs: { allow: ['.'] } },
  test: {
    include: ['tests/**/*.test.ts', 'tests/**/*.test.tsx'],
    environment: 'node',
    // Each test file gets its own process: Dawn's Node binding is not safe to share across worker threads.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: true,
  },
});
