import { Type, type Static } from '@sinclair/typebox';

/**
 * The records the public API answers with: the schemas validate and document the answers
 * (routes/), and the DTO types the domain builds are derived from them, so the two cannot drift
 * (decision 0123).
 */

export const User = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    email: Type.String(),
    name: Type.String(),
    platform_role_id: Type.String(),
    is_system_admin: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    disabled_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'User' },
);

export const MemberRole = Type.Union([Type.Literal('admin'), Type.Literal('editor'), Type.Literal('viewer')]);

export const Workspace = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    description: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    deleted_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    member_count: Type.Integer(),
  },
  { $id: 'Workspace' },
);

export const Member = Type.Object(
  {
    workspace_id: Type.String({ format: 'uuid' }),
    user_id: Type.String({ format: 'uuid' }),
    email: Type.String(),
    name: Type.String(),
    role: MemberRole,
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'Member' },
);

const Time = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);
export const RunStatus = Type.Union([
  Type.Literal('queued'),
  Type.Literal('running'),
  Type.Literal('succeeded'),
  Type.Literal('failed'),
  Type.Literal('cancelled'),
]);
export const Run = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    workspace_id: Type.String({ format: 'uuid' }),
    schedule_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    notebook_path: Type.String(),
    parameters: Type.Record(Type.String(), Type.Unknown()),
    status: RunStatus,
    created_at: Type.String({ format: 'date-time' }),
    started_at: Time,
    finished_at: Time,
    error: Type.Union([Type.String(), Type.Null()]),
    log_key: Type.Union([Type.String(), Type.Null()]),
    output_path: Type.Union([Type.String(), Type.Null()]),
    /** Who started it, or made the schedule that did (a user id); null once that user is deleted. */
    created_by: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
  },
  { $id: 'Run' },
);
export const Schedule = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    workspace_id: Type.String({ format: 'uuid' }),
    notebook_path: Type.String(),
    cron: Type.String(),
    timezone: Type.String(),
    enabled: Type.Boolean(),
    next_run_at: Time,
    last_run_at: Time,
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    /**
     * The member it runs for: who made it or changed it last (a user id; decision 0254); null
     * once that user is deleted. It is switched off at its next tick once they may no longer run
     * notebooks in the workspace.
     */
    created_by: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
  },
  { $id: 'Schedule' },
);

export type UserDto = Static<typeof User>;
export type WorkspaceDto = Static<typeof Workspace>;
export type MemberDto = Static<typeof Member>;
export type RunDto = Static<typeof Run>;
export type ScheduleDto = Static<typeof Schedule>;
