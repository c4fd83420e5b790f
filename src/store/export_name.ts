// The file name a download gets (issue 24: every export of the page's own update was named
// "current step.grpo-batch.json"). An imported batch keeps its file's name; a batch the page stepped is
// named after the model that produced it and the update's number ("SmolLM2-135M.update-2"), so two saves
// of different updates never read the same. Pure, so a test pins the names without a browser.

/** A name safe in a file system and a shell: no spaces, slashes or other punctuation beyond . _ -. */
const slug = (s: string) => s.trim().replace(/\.json$/i, '').replace(/[^\w.-]+/g, '-').replace(/^-+|-+$/g, '') || 'batch';

export interface ExportSource {
  /** What the session calls the batch on screen (an imported file's name, "x.json (stepped)", "current step"). */
  batchName: string;
  batchOrigin: 'import' | 'step' | null;
  /** The imported batch a step started from, when it did. */
  importedName?: string | null;
  /** The loaded model (a Hub id, a folder name), for a batch the page stepped. */
  modelName?: string | null;
  /** Updates taken on the policy so far (the one on screen included once its step ran). */
  policySteps: number;
  /** Whether the update on screen has taken its optimizer step (else it is update policySteps + 1). */
  stepDone: boolean;
}

/** The base name (no extension) of an export of the batch on screen. */
export function exportBase(s: ExportSource): string {
  if (s.batchOrigin !== 'step') return slug(s.batchName);
  const update = `update-${s.policySteps + (s.stepDone ? 0 : 1)}`;
  if (s.importedName) return `${slug(s.importedName)}.stepped.${update}`;
  return `${slug((s.modelName ?? 'model').split('/').pop()!)}.${update}`;
}
