// Tiny argument parser shared by every CLI verb: positionals plus `--flag value` / `--switch`.
// Bad input raises CliError, which main() turns into a one-line reason and exit code 2.

export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

export interface ParsedArgs {
  positional: string[];
  flags: Map<string, string | true>;
}

export function parseArgs(argv: string[], spec: { values: string[]; switches?: string[] }): ParsedArgs {
  const positional: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2);
    if (spec.switches?.includes(name)) {
      flags.set(name, true);
    } else if (spec.values.includes(name)) {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new CliError(`--${name} needs a value`);
      flags.set(name, v);
    } else {
      throw new CliError(`unknown option --${name}`);
    }
  }
  return { positional, flags };
}

export function flag(p: ParsedArgs, name: string): string | undefined {
  const v = p.flags.get(name);
  return typeof v === 'string' ? v : undefined;
}
