// Poll a job until it is done, like a model would against a status endpoint.
let polls = 0;
const status = await new Promise((resolve, reject) => {
  const id = setInterval(async () => {
    polls++;
    try {
      const r = await tools.job_status({ job: 'export-7' });
      if (r.details.state === 'done') { clearInterval(id); resolve(r.details); }
    } catch (e) { clearInterval(id); reject(e); }
  }, 5);
});
return { polls, result: status.result };
