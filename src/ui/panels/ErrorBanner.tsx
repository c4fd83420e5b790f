// Errors as clear messages at the top of the page, one per distinct message, each dismissable.
import { useStudio } from '../../store/index.ts';
import type { ErrorKind } from '../../bridge/protocol.ts';

const TITLES: Record<ErrorKind, string> = {
  'bad-file': 'Bad file',
  'unsupported-model': 'Unsupported model',
  'out-of-memory': 'Out of GPU memory',
  'device-lost': 'GPU device lost',
  'no-webgpu': 'WebGPU unavailable',
  gpu: 'GPU error',
  reward: 'Reward error',
  settings: 'Invalid settings',
  notice: 'Note',
  internal: 'Error',
};

export function ErrorBanner() {
  const errors = useStudio((s) => s.errors);
  const dismiss = useStudio((s) => s.dismissError);
  if (errors.length === 0) return null;
  return (
    <div className="errors" role="alert" data-testid="errors">
      {errors.map((e) => (
        <div key={e.id} className={`error-msg ${e.kind}`} data-kind={e.kind}>
          <b>{TITLES[e.kind]}:</b> <span>{e.message}</span>
          {e.detail && (
            <details>
              <summary>details</summary>
              <pre>{e.detail}</pre>
            </details>
          )}
          <button className="x" onClick={() => dismiss(e.id)} title="dismiss" aria-label="dismiss">
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
