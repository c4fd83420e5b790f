// Entry of the reward sandbox worker: one request in, one reply per sample out (see reward_sandbox.ts).
import { handleSandboxMessage, type SandboxReply, type SandboxRequest } from './reward_sandbox.ts';

const post = self.postMessage.bind(self) as (r: SandboxReply) => void;
self.onmessage = (ev: MessageEvent<SandboxRequest>) => handleSandboxMessage(ev.data, post);
