import { ensureIndexes, mongoCall, unavailable, type Db } from '@threadwork/platform';
import { insertIfAbsent } from './insert.js';
import type { ProjectRecord } from './records.js';

/** One project per owner and ordered repository set. */
export function createProjectStore(db: Db) {
  const projects = db.collection<ProjectRecord>('projects');

  return {
    async ensureIndexes(): Promise<void> {
      await ensureIndexes(projects, [
        {
          key: { key: 1 },
          options: { name: 'key_unique', unique: true },
          serves: "find-or-create the project of an owner's ordered repository set; one project per set",
        },
      ]);
    },

    async findOrCreateProject(project: ProjectRecord): Promise<ProjectRecord> {
      const existing = await mongoCall(() => projects.findOne({ key: project.key }));
      if (existing) return existing;
      if (await insertIfAbsent(projects, project)) return project;
      const winner = await mongoCall(() => projects.findOne({ key: project.key }));
      if (!winner) throw unavailable('project not readable yet');
      return winner;
    },

    getProject: (projectId: string) => mongoCall(() => projects.findOne({ _id: projectId })),

    projectsByIds: (ownerId: string, projectIds: string[]) =>
      mongoCall(() => projects.find({ _id: { $in: projectIds }, owner_id: ownerId }).toArray()),
  };
}
