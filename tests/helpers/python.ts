// A Python 3 that can import torch (Debian's python3-torch lives under /usr/bin/python3, which a
// pyenv shim may hide). Tests that run Python fail, never skip, when there is none.
import { spawnSync } from 'node:child_process';

let found: string | undefined;

export function python(): string {
  if (found) return found;
  for (const exe of [process.env.PYTHON, 'python3', '/usr/bin/python3'].filter(Boolean) as string[]) {
    if (spawnSync(exe, ['-c', 'import torch, numpy'], { encoding: 'utf8' }).status === 0) return (found = exe);
  }
  throw new Error('no python3 with torch and numpy (install python3-torch, or set PYTHON)');
}
