// The CLI's answer to unusable input, run in-process through main() (the binary's code path): exit 2 and
// exactly one line on stderr that matches `msg`.
import { expect, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';

export async function expectRefusal(argv: string[], msg: RegExp): Promise<void> {
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  try {
    expect(await main(argv)).toBe(2);
    expect(err).toHaveBeenCalledTimes(1);
    const line = String(err.mock.calls[0][0]);
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toMatch(msg);
  } finally {
    err.mockRestore();
  }
}
