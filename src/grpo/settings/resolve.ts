// Reads a `config` or `run` object against a settings table for the verl / OpenRLHF objectives: the shared
// parser (table.ts: type, allowed values, range, defaults; errors name the field), with their policy that a
// field the table does not know is an error rather than a listed, unused key.
import { parseSettings } from './table.ts';
import { SettingsError, type SettingSpec, type SettingValue } from './types.ts';

/** The table's values for `given` (defaults filled in); `where` prefixes error messages (e.g. "config"). */
export function resolveSettings<T = Record<string, SettingValue>>(table: readonly SettingSpec[], given: Record<string, unknown>, where: string): T {
  const { values, unknown } = parseSettings<T>(table, given, where);
  if (unknown.length) throw new SettingsError(`${where}.${unknown[0]}: not a ${table[0]?.trainer ?? ''} setting the studio knows`);
  return values;
}
