#!/usr/bin/env node
// Headless entry: `npx grpo-studio <verb> ...`. Runs the TypeScript CLI through tsx, so the same source
// serves the browser build and the command line with no separate compile step.
import { register } from 'tsx/esm/api';
register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
process.exit(process.exitCode);
