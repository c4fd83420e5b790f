#!/usr/bin/env node
// Headless entry: `npx grpo-studio <verb> ...`. Runs the TypeScript CLI through tsx, so the same source
// serves the browser build and the command line with no separate compile step. The exit code is main()'s
// (0 clean, 1 error findings, 2 unusable input, 3 internal error: README "Exit codes"); stdout and stderr
// are drained before exiting, because process.exit right after a big write cuts a piped result at 64 KiB.
import { register } from 'tsx/esm/api';
register();
const { main, flushed } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
await flushed();
// Exit explicitly: a WebGPU device the verb opened would otherwise keep the process alive.
process.exit(code);
