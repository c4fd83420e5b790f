// The stepper: the stages of one GRPO update with Next / Run to end / Reset; each stage shows its status,
// its time and the GPU memory after it; the stage Next will run is highlighted.
import { studioStore, useStudio } from '../../store/index.ts';
import { STAGES, STAGE_LABELS } from '../../worker/protocol.ts';
import { nextStage, resetStep, runToEnd } from '../controller.ts';
import { formatBytes } from '../fields.tsx';

export function Stepper() {
  const stages = useStudio((s) => s.stages);
  const cursor = useStudio((s) => s.cursor);
  const running = useStudio((s) => s.running);
  const modelReady = useStudio((s) => s.modelStatus === 'ready');
  const busy = running || STAGES.some((s) => stages[s].status === 'running');
  const done = cursor >= STAGES.length;
  return (
    <div className="stepper" data-testid="stepper">
      <div className="stepper-buttons">
        <button disabled={!modelReady || busy || done} onClick={() => void nextStage()} data-testid="step-next">
          Next ▸
        </button>
        <button disabled={!modelReady || busy || done} onClick={() => void runToEnd()} data-testid="step-run">
          Run to end ▸▸
        </button>
        <button disabled={busy && !running} onClick={() => (running ? stop() : void resetStep())} data-testid="step-reset">
          {running ? 'Stop' : 'Reset'}
        </button>
        {!modelReady && <span className="muted small">load a model to step; an imported batch is inspected without one</span>}
      </div>
      <ol className="stages">
        {STAGES.map((id, i) => {
          const st = stages[id];
          const cls = ['stage', st.status, i === cursor && !done ? 'current' : ''].join(' ');
          return (
            <li key={id} className={cls} data-stage={id} title={STAGE_LABELS[id]}>
              <span className="stage-name">{STAGE_LABELS[id]}</span>
              <span className="stage-meta">
                {st.status === 'running' ? 'running…' : st.ms !== undefined ? `${st.ms.toFixed(1)} ms` : ''}
                {st.memory ? ` · ${formatBytes(st.memory.bytes)}` : ''}
              </span>
            </li>
          );
        })}
      </ol>
    </div>
  );
}

/** Stops "Run to end" after the stage in flight (the worker finishes it; nothing is cut mid-kernel). */
function stop(): void {
  studioStore().getState().setRunning(false);
}
