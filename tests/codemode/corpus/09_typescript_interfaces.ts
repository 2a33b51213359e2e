interface User { id: number; name: string; team: string; active: boolean }
type TeamCount = Record<string, number>;

const { details: users } = (await tools.list_users({})) as { details: User[] };
const counts: TeamCount = {};
for (const u of users) counts[u.team] = (counts[u.team] ?? 0) + 1;
return counts;
