#!/usr/bin/env node
// Headless entry: `npx grpo-studio <verb> ...`. Runs the TypeScript CLI through tsx, so the same source
// serves the browser build and the command line with no separate compile step. The exit code is main()'s
// (0 clean, 1 error findings, 2 unusable input, 3 internal error: README "Exit codes"); stdout and stderr
// are drained before exiting, because process.exit right after a big write cuts a piped result at 64 KiB.
//
// The CLI runs in a child process whose stderr passes through this one: Dawn's C++ logger prints notices
// about its own limits on software Vulkan (lavapipe: "maxDynamic…BuffersPerPipelineLayout artificially
// reduced …") straight to fd 2 when the GPU is opened, with no hook in the npm package, and they would
// precede the one-line reason of an exit 2. Those two exact lines are dropped; every other line passes as is.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';

const CHILD = 'GRPO_STUDIO_CLI_CHILD';
const DAWN_NOTICE = /^Warning: maxDynamic(Uniform|Storage)BuffersPerPipelineLayout artificially reduced from \d+ to \d+ to fit dynamic offset allocation limit\.$/;

// A reader that stops early (`| head`) closes the pipe: nothing more can be delivered, which is not an
// error of ours and must not end in an unhandled EPIPE stack trace. Any other failure to write (a full disk:
// ENOSPC) loses the result: one line on stderr and exit 2, never a stack trace or a silent exit 0.
let code = 0;
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e) => {
    if (e.code === 'EPIPE') process.exit(code);
    if (stream === process.stdout) process.stderr.write(`grpo-studio: cannot write the output: ${e.message.split('\n')[0]}\n`);
    process.exit(2);
  });
}

if (process.env[CHILD] !== '1') {
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: ['inherit', 'inherit', 'pipe'],
    env: { ...process.env, [CHILD]: '1' },
  });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  let rest = '';
  const pass = (line) => DAWN_NOTICE.test(line) || process.stderr.write(`${line}\n`);
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => {
    const lines = (rest + text).split('\n');
    rest = lines.pop();
    lines.forEach(pass);
  });
  const [exit] = await Promise.all([
    new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? 128 + (constants.signals[signal] ?? 0)))),
    new Promise((resolve) => child.stderr.on('end', resolve)),
  ]);
  if (rest && !DAWN_NOTICE.test(rest)) process.stderr.write(rest);
  code = exit;
  // Exit once stderr has drained (a piped reader gets every line).
  process.stderr.write('', () => process.exit(code));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  const { main, flushed } = await import('../src/cli/main.ts');
  code = await main(process.argv.slice(2));
  await flushed();
  // A failed write reports through the stream's 'error' event (above): let it fire before exiting with main()'s code.
  await new Promise((resolve) => setImmediate(resolve));
  // Exit explicitly: a WebGPU device the verb opened would otherwise keep the process alive.
  process.exit(code);
}
