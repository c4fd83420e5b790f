// The stepper: the stages of one GRPO update with Next / Run to end / Reset; each stage shows its status,
// its time and the GPU memory after it (peak during it in the tooltip); the stage Next will run is
// highlighted. An update starts from the prompt set or from the imported batch (render / sample /
// reward are then skipped and say why) — the second is how a Python trainer's dumped batch is replayed.
import { studioStore, useStudio } from '../../store/index.ts';
import { STAGES, STAGE_LABELS } from '../../store/vocabulary.ts';
import { nextStage, resetStep, runToEnd, setStepFrom } from '../../store/controller.ts';
import { formatBytes } from '../fields.tsx';

export function Stepper() {
  const stages = useStudio((s) => s.stages);
  const cursor = useStudio((s) => s.cursor);
  const running = useStudio((s) => s.running);
  const modelReady = useStudio((s) => s.modelStatus === 'ready');
  const imported = useStudio((s) => s.imported);
  const stepFrom = useStudio((s) => s.stepFrom);
  const busy = running || STAGES.some((s) => stages[s].status === 'running');
  const done = cursor >= STAGES.length;
  const total = STAGES.reduce((t, s) => t + (stages[s].ms ?? 0), 0);
  return (
    <div className="stepper" data-testid="stepper">
      <div className="stepper-buttons">
        <button disabled={!modelReady || busy || done} onClick={() => void nextStage()} data-testid="step-next">
          Next ▸
        </button>
        <button disabled={!modelReady || busy || done} onClick={() => void runToEnd()} data-testid="step-run">
          Run to end ▸▸
        </button>
        <button disabled={busy && !running} onClick={() => (running ? stop() : void resetStep())} data-testid="step-reset" title="undo the optimizer step and start over">
          {running ? 'Stop' : 'Reset'}
        </button>
        <label className="small" title="an imported batch skips render / sample / reward and replays the trainer's update on the loaded model">
          start from{' '}
          <select value={stepFrom} disabled={busy} onChange={(e) => void setStepFrom(e.target.value as typeof stepFrom)} data-testid="step-from">
            <option value="prompts">prompt set</option>
            <option value="import" disabled={!imported}>
              {imported ? `imported batch (${imported.name})` : 'imported batch (none)'}
            </option>
          </select>
        </label>
        {!modelReady && <span className="muted small">load a model to step; an imported batch is inspected without one</span>}
        {cursor > 0 && (
          <span className="small muted" data-testid="step-total">
            {done ? 'update complete' : `${cursor} / ${STAGES.length} stages`} · {total.toFixed(0)} ms
          </span>
        )}
      </div>
      <ol className="stages">
        {STAGES.map((id, i) => {
          const st = stages[id];
          const cls = ['stage', st.status, i === cursor && !done ? 'current' : ''].join(' ');
          const title = [STAGE_LABELS[id], st.skipped ? `skipped: ${st.skipped}` : '', st.peakBytes !== undefined ? `GPU memory after ${formatBytes(st.gpuBytes!)}, peak ${formatBytes(st.peakBytes)}` : ''].filter(Boolean).join('\n');
          return (
            <li key={id} className={cls} data-stage={id} data-status={st.status} title={title}>
              <span className="stage-name">{STAGE_LABELS[id]}</span>
              <span className="stage-meta" data-testid="stage-meta">
                {st.status === 'running' ? 'running…' : st.status === 'skipped' ? 'skipped' : st.ms !== undefined ? fmtMs(st.ms) : ''}
                {st.status === 'done' && st.gpuBytes !== undefined ? ` · ${formatBytes(st.gpuBytes)}` : ''}
              </span>
            </li>
          );
        })}
      </ol>
    </div>
  );
}

const fmtMs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`);

/** Stops "Run to end" after the stage in flight (the worker finishes it; nothing is cut mid-kernel). */
function stop(): void {
  studioStore().getState().setRunning(false);
}
