-- Who uploaded a run through the dashboard when login (st.login) is on; null otherwise.
ALTER TABLE runs ADD COLUMN uploaded_by VARCHAR;
