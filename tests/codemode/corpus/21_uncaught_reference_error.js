const { details: users } = await tools.list_users({});
const names = users.map(u => u.name);
return formatNames(names);
