// The stepper: the stages of one GRPO update with Next / Run to end / Reset; each stage shows its status,
// its time and the GPU memory after it (peak during it in the tooltip); the stage Next will run is
// highlighted. An update starts from the prompt set or from the imported batch (render / sample /
// reward are then skipped and say why) — the second is how a Python trainer's dumped batch is replayed.
// After a completed update, "Next update" continues from the stepped weights (as TRL: the policy keeps
// training, the frozen-copy reference stays the model as loaded, so KL before the step grows) or
// restarts from the loaded weights; Reset undoes the update's step. The reference stage names its reference.
import { useRef } from 'react';
import { studioStore, useStudio } from '../../store/index.ts';
import { effectiveOf, STAGES, STAGE_LABELS } from '../../store/vocabulary.ts';
import { nextStage, resetStep, runNextUpdate, runToEnd, setStepFrom } from '../../store/controller.ts';
import { fmt, formatBytes } from '../fields.tsx';
import { staleFields, updateInProgress } from '../../store/derived.ts';

export function Stepper() {
  const stages = useStudio((s) => s.stages);
  const cursor = useStudio((s) => s.cursor);
  const modelReady = useStudio((s) => s.modelStatus === 'ready');
  const imported = useStudio((s) => s.imported);
  const stepFrom = useStudio((s) => s.stepFrom);
  const running = useStudio((s) => s.running);
  const busy = useStudio(updateInProgress);
  const done = cursor >= STAGES.length;
  const total = STAGES.reduce((t, s) => t + (stages[s].ms ?? 0), 0);
  const resetRef = useRef<HTMLButtonElement>(null);
  const reference = useStudio((s) => s.run.reference_forward);
  const weights = useStudio((s) => s.weights);
  const setWeights = useStudio((s) => s.setWeights);
  const policySteps = useStudio((s) => s.policySteps);
  const optimizerStep = useStudio((s) => s.run.step);
  // Run to end disables itself when the update completes, which would drop keyboard focus to <body>: hand it to Reset.
  const run = () =>
    void runToEnd().then(() => {
      if (document.activeElement === document.body || (document.activeElement as HTMLButtonElement | null)?.disabled) resetRef.current?.focus();
    });
  return (
    <div className="stepper" data-testid="stepper">
      <div className="stepper-buttons">
        <button disabled={!modelReady || busy || done} onClick={() => void nextStage()} data-testid="step-next">
          Next ▸
        </button>
        <button disabled={!modelReady || busy || done} onClick={run} data-testid="step-run">
          Run to end ▸▸
        </button>
        <button ref={resetRef} disabled={busy && !running} onClick={() => (running ? stop() : void resetStep())} data-testid="step-reset" title="undo this update's optimizer step (back to the weights before it) and start over">
          {running ? 'Stop' : 'Reset'}
        </button>
        {done && (
          <button disabled={!modelReady || busy} onClick={() => void runNextUpdate()} data-testid="step-next-update" title={`run the next update to the end, from the ${weights === 'continue' ? 'weights this update stepped to' : 'weights as loaded'}`}>
            Next update ▸▸
          </button>
        )}
        <label className="small" title="continue: each update starts from the weights the last one stepped to (as TRL; the frozen-copy reference stays the model as loaded, so KL before the step is > 0). restart: every update starts from the weights as loaded (KL 0 before the step against the frozen copy).">
          from{' '}
          <select value={weights} disabled={busy} onChange={(e) => setWeights(e.target.value as typeof weights)} data-testid="step-weights">
            <option value="continue">stepped weights (continue)</option>
            <option value="loaded">loaded weights (restart)</option>
          </select>
        </label>
        {modelReady && (
          <span className="small muted" data-testid="policy-weights" title="how many optimizer steps the policy's weights are away from the weights as loaded">
            policy: {policySteps === 0 ? 'as loaded' : `loaded + ${policySteps} step${policySteps === 1 ? '' : 's'}`}
          </span>
        )}
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
      <StaleNote />
      <ol className="stages">
        {STAGES.map((id, i) => {
          const st = stages[id];
          const cls = ['stage', st.status, i === cursor && !done && st.status !== 'error' ? 'current' : ''].join(' ');
          const optimizerText = id === 'step' && optimizerStep ? `${optimizerStep.optimizer.name} step ${optimizerStep.step} · lr ${fmt(optimizerStep.optimizer.lr)}` : null;
          const referenceText = id === 'reference_forward' && reference ? `ref: ${reference.reference_label}` : null;
          // The chip shows one line of numbers (the grid below keeps the height); the tooltip holds every line whole.
          const title = [STAGE_LABELS[id], st.skipped ? `skipped: ${st.skipped}` : '', st.peakBytes !== undefined ? `GPU memory after ${formatBytes(st.gpuBytes!)}, peak ${formatBytes(st.peakBytes)}` : '', optimizerText ?? '', referenceText ?? ''].filter(Boolean).join('\n');
          return (
            <li key={id} className={cls} data-stage={id} data-status={st.status} title={title}>
              <span className="stage-name">{STAGE_LABELS[id]}</span>
              <span className="stage-line">
                <span className="stage-meta" data-testid="stage-meta">
                  {st.status === 'running' ? 'running…' : st.status === 'skipped' ? 'skipped' : st.ms !== undefined ? fmtMs(st.ms) : ''}
                  {st.status === 'done' && st.gpuBytes !== undefined ? ` · ${formatBytes(st.gpuBytes)}` : ''}
                </span>
                {optimizerText && (
                  <span className="stage-meta stage-extra" data-testid="optimizer-step" data-lr={optimizerStep!.optimizer.lr} title="torch's state['step']: an update that continues from stepped weights carries the optimizer's moments and step count over, as a trainer's next step. lr: the learning rate this step took (the trainer's schedule at the run's position: TRL run.global_step, verl run.global_steps, OpenRLHF run.actor_optimizer_steps)">
                    {optimizerText}
                  </span>
                )}
                {referenceText && (
                  <span className="stage-meta stage-extra" data-testid="reference-kind" title={REFERENCE_TEXT[reference!.reference]}>
                    {referenceText}
                  </span>
                )}
              </span>
            </li>
          );
        })}
      </ol>
    </div>
  );
}

/** Which reference model the KL is measured against, as the reference stage reports it. */
const REFERENCE_TEXT = {
  'frozen-copy':
    "a frozen copy of the policy as loaded (TRL's default with β > 0): a snapshot of the weights taken at load. The first update from the loaded weights has KL = 0 before its step; continuing from stepped weights, the policy moves away from the copy and KL before the step is > 0.",
  model: 'a separately loaded reference checkpoint',
  'base-without-adapter': 'the base model with the LoRA adapter disabled (TRL + PEFT)',
  'frozen-adapter': 'a frozen copy of the loaded LoRA adapter (TRL handed an already-wrapped PeftModel)',
  batch: "the batch's ref_per_token_logps: the trainer's own reference log-probs, which its loss read (a reference model loaded too is only scored against them)",
  none: 'no reference (β = 0)',
} as const;

/** Says when the form no longer matches the settings the results on screen were computed with. */
function StaleNote() {
  const ran = useStudio((s) => s.runSettings);
  const prompts = useStudio((s) => s.prompts);
  const sampling = useStudio((s) => s.sampling);
  const rewards = useStudio((s) => s.rewards);
  const tools = useStudio((s) => s.tools);
  const effective = useStudio(effectiveOf);
  const changed = staleFields(ran, { prompts, sampling, rewards, tools, settings: 'settings' in effective ? effective.settings : null });
  if (changed.length === 0) return null;
  return (
    <div className="stale-note small" data-testid="stale-note" title={changed.join('\n')}>
      <b>stale:</b> these results were computed with the settings of when the update started ({changed.slice(0, 3).join('; ')}
      {changed.length > 3 ? `; +${changed.length - 3} more` : ''}). Labels show the settings they ran with; Reset and run again to use the new ones, or try loss settings on this batch in What-if.
    </div>
  );
}

const fmtMs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`);

/** Stops "Run to end" after the stage in flight (the worker finishes it; nothing is cut mid-kernel). */
function stop(): void {
  studioStore().getState().setRunning(false);
}
