#!/usr/bin/env node
// Headless entry: `npx grpo-studio <verb> ...`. Runs the TypeScript CLI through tsx, so the same source
// serves the browser build and the command line with no separate compile step. The exit code is main()'s
// (0 clean, 1 error findings, 2 unusable input, 3 internal error: README "Exit codes"); stdout and stderr
// are drained before exiting, because process.exit right after a big write cuts a piped result at 64 KiB.
import { register } from 'tsx/esm/api';
register();
const { main, flushed } = await import('../src/cli/main.ts');
// A reader that stops early (`| head`) closes the pipe: nothing more can be delivered, which is not an
// error of ours and must not end in an unhandled EPIPE stack trace.
let code = 0;
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e) => {
    if (e.code !== 'EPIPE') throw e;
    process.exit(code);
  });
}
code = await main(process.argv.slice(2));
await flushed();
// Exit explicitly: a WebGPU device the verb opened would otherwise keep the process alive.
process.exit(code);
