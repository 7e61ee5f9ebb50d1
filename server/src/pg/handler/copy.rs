//! COPY on one connection: the statement's options; TO STDOUT or a server-side file; FROM STDIN
//! (pgwire's CopyHandler: rows parsed as CopyData arrives and staged in the engine, one commit at
//! CopyDone, the staged files dropped on CopyFail or an error) and FROM a server-side file.

use super::*;

/// A COPY FROM in progress: parsed as data arrives, its rows staged in the engine (written to
/// files, committed at the end), so memory holds a bounded part of the data.
pub(super) struct CopyIn {
    parser: CopyDecoder,
    target: SchemaRef,
    control: Arc<StatementControl>,
    staged: StagedCopy,
}

/// Bytes read at a time from a server-side file by COPY FROM.
const COPY_FILE_CHUNK_BYTES: usize = 1024 * 1024;

impl Connection {
    pub(super) async fn copy<C>(
        &self,
        client: &mut C,
        source: &CopySource,
        to: bool,
        target: &CopyTarget,
        options: CopyOptions,
        format: &Format,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let _ = format;
        if to {
            let query = match source {
                CopySource::Table { table_name, columns } if columns.is_empty() => {
                    format!("SELECT * FROM {table_name}")
                }
                CopySource::Table { table_name, columns } => {
                    format!(
                        "SELECT {} FROM {table_name}",
                        columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
                    )
                }
                CopySource::Query(query) => query.to_string(),
            };
            let statement = parse_statements(&query)
                .map_err(|e| encode::error(&e))?
                .into_iter()
                .next()
                .ok_or_else(|| user_error("42601", "empty COPY query"))?;
            if !matches!(&statement, SluiceStatement::Standard(s) if matches!(**s, Statement::Query(_))) {
                // PostgreSQL copies out of INSERT/UPDATE/DELETE only with RETURNING, which Sluice
                // does not have yet.
                return Err(user_error("0A000", "COPY of a statement other than a query is not supported"));
            }
            let result =
                self.run_in_engine(client, self.rewrite(statement)?, &[]).await.map_err(|e| encode::error(&e))?;
            let StatementResult::Rows { schema, batches } = result else {
                return Err(user_error("42601", "COPY TO needs a query"));
            };
            return match target {
                CopyTarget::Stdout => super::super::copy_out::response(&schema, batches, &options),
                CopyTarget::File { filename } => {
                    let path = self.client_file(filename, PathUse::WriteFile)?;
                    let rows = super::super::copy_out::write_file(&path, &schema, batches, &options)?;
                    Ok(Response::Execution(Tag::new("COPY").with_rows(rows)))
                }
                other => Err(user_error("0A000", format!("COPY TO {other} is not supported"))),
            };
        }
        let CopySource::Table { table_name, columns } = source else {
            return Err(user_error("42601", "COPY FROM needs a table"));
        };
        let table = table_name.to_string();
        let name = sluice::sql::names::table_name(table_name).map_err(|e| encode::error(&e))?;
        let handle = self.server.db.table(&name).await.map_err(|e| encode::error(&e))?;
        let table_schema =
            handle.snapshot().await.map_err(|e| encode::error(&sluice::Error::Storage(e)))?.arrow_schema();
        let names: Vec<String> = if columns.is_empty() {
            table_schema.fields().iter().map(|f| f.name().clone()).collect()
        } else {
            columns.iter().map(sluice::sql::names::normalize).collect()
        };
        let mut target_fields = Vec::new();
        for column in &names {
            let field = table_schema
                .field_with_name(column)
                .map_err(|_| encode::error(&sluice::Error::UndefinedColumn(column.clone())))?;
            target_fields.push(field.clone());
        }
        let target_schema = Arc::new(Schema::new(target_fields));
        let format_code = if options.format == CopyFormat::Binary { 1 } else { 0 };
        let parser = CopyDecoder::new(&target_schema, options).map_err(|e| user_error("0A000", e))?;
        let file = match target {
            CopyTarget::Stdin => None,
            CopyTarget::File { filename } => Some((filename.clone(), self.client_file(filename, PathUse::ReadFile)?)),
            other => return Err(user_error("0A000", format!("COPY FROM {other} is not supported"))),
        };
        let control = StatementControl::new(self.session.privileges());
        let staged = self.session.copy_begin(&table, control.clone()).await.map_err(|e| encode::error(&e))?;
        let mut copy = CopyIn { parser, target: target_schema, control, staged };
        let Some((filename, path)) = file else {
            let columns = names.len();
            *self.copy_in.lock().await = Some(copy);
            return Ok(Response::CopyIn(CopyResponse::new(format_code, columns, futures::stream::empty())));
        };
        if let Err(e) = self.copy_file(&mut copy, &filename, &path).await {
            self.session.copy_abort(copy.staged).await;
            return Err(e);
        }
        let rows = self.finish_copy(client, copy).await?;
        Ok(Response::Execution(Tag::new("COPY").with_rows(rows as usize)))
    }

    /// Reads a server-side file into a COPY, a chunk at a time.
    async fn copy_file(&self, copy: &mut CopyIn, filename: &str, path: &std::path::Path) -> PgWireResult<()> {
        use tokio::io::AsyncReadExt;
        let mut file = tokio::fs::File::open(path)
            .await
            .map_err(|e| user_error("58P01", format!("could not open file \"{filename}\" for reading: {e}")))?;
        let mut chunk = vec![0u8; COPY_FILE_CHUNK_BYTES];
        loop {
            let read = file
                .read(&mut chunk)
                .await
                .map_err(|e| user_error("58030", format!("could not read file \"{filename}\": {e}")))?;
            let Some(data) = chunk.get(..read).filter(|d| !d.is_empty()) else { break };
            let batches = copy.parser.push(data).map_err(|e| user_error("22P04", format!("bad COPY data: {e}")))?;
            self.stage(copy, batches).await?;
        }
        Ok(())
    }

    /// Casts parsed COPY text to the table's types and hands the rows to the engine.
    async fn stage(&self, copy: &mut CopyIn, batches: Vec<RecordBatch>) -> PgWireResult<()> {
        let mut typed = Vec::with_capacity(batches.len());
        for batch in batches {
            if copy.parser.yields_text() {
                typed.push(
                    super::super::copy_out::cast_text_batch(&batch, &copy.target)
                        .map_err(|e| user_error("22P02", e))?,
                );
            } else {
                typed.push(batch);
            }
        }
        self.session.copy_rows(&mut copy.staged, typed).await.map_err(|e| encode::error(&e))
    }

    /// Ends a COPY: its last rows, then one commit (under the statement timeout and cancels).
    async fn finish_copy<C: ClientInfo>(&self, client: &C, mut copy: CopyIn) -> PgWireResult<u64> {
        let last = match copy.parser.finish() {
            Ok(last) => last,
            Err(e) => {
                self.session.copy_abort(copy.staged).await;
                return Err(user_error("22P04", format!("bad COPY data: {e}")));
            }
        };
        if let Err(e) = self.stage(&mut copy, last).await {
            self.session.copy_abort(copy.staged).await;
            return Err(e);
        }
        let control = copy.control.clone();
        self.controlled(client, control, self.session.copy_commit(copy.staged)).await.map_err(|e| encode::error(&e))
    }
}

pub(super) fn copy_settings(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> PgWireResult<CopyOptions> {
    let mut settings = CopyOptions::default();
    let single = |text: &str| text.as_bytes().first().copied().unwrap_or(b',');
    for option in options {
        match option {
            CopyOption::Format(format) => match format.value.to_lowercase().as_str() {
                "csv" => settings.csv(),
                "text" => {}
                "binary" => settings.format = CopyFormat::Binary,
                other => return Err(user_error("22023", format!("COPY format \"{other}\" not recognized"))),
            },
            CopyOption::Delimiter(c) => settings.delimiter = *c as u8,
            CopyOption::Header(h) => settings.header = *h,
            CopyOption::Null(n) => settings.null = n.clone(),
            CopyOption::Quote(q) => settings.quote = *q as u8,
            CopyOption::Escape(e) => settings.escape = *e as u8,
            _ => {}
        }
    }
    for option in legacy {
        match option {
            CopyLegacyOption::Binary => settings.format = CopyFormat::Binary,
            CopyLegacyOption::Csv(csv_options) => {
                settings.csv();
                for csv in csv_options {
                    match csv {
                        CopyLegacyCsvOption::Header => settings.header = true,
                        CopyLegacyCsvOption::Quote(q) => settings.quote = *q as u8,
                        CopyLegacyCsvOption::Escape(e) => settings.escape = *e as u8,
                        _ => {}
                    }
                }
            }
            CopyLegacyOption::Delimiter(c) => settings.delimiter = *c as u8,
            CopyLegacyOption::Null(n) => settings.null = n.clone(),
            _ => {}
        }
    }
    let _ = single;
    Ok(settings)
}

#[async_trait]
impl CopyHandler for Connection {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut guard = self.copy_in.lock().await;
        let Some(copy) = guard.as_mut() else { return Err(user_error("08P01", "COPY data without COPY")) };
        let staged = match copy.parser.push(&copy_data.data) {
            Ok(batches) => self.stage(copy, batches).await,
            Err(e) => Err(user_error("22P04", format!("bad COPY data: {e}"))),
        };
        if staged.is_err() {
            if let Some(copy) = guard.take() {
                self.session.copy_abort(copy.staged).await;
            }
        }
        staged
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(copy) = self.copy_in.lock().await.take() else {
            return Err(user_error("08P01", "COPY done without COPY"));
        };
        let rows = self.finish_copy(client, copy).await?;
        client.send(PgWireBackendMessage::CommandComplete(Tag::new("COPY").with_rows(rows as usize).into())).await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: pgwire::messages::copy::CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(copy) = self.copy_in.lock().await.take() {
            self.session.copy_abort(copy.staged).await;
        }
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "ERROR".into(),
            "57014".into(),
            format!("COPY from stdin failed: {}", fail.message),
        )))
    }
}
